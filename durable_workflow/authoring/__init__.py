"""What users write: Workflow and Activity classes and the in-body helpers."""
