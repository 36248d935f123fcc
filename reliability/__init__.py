"""The reliability suite: faults injected on purpose into real processes, with figures
(``bash reliability/chaos.sh``; see docs/reliability.md)."""
