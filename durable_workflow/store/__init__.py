"""Every ORM read and write. Callers get plain records back, never model instances."""
