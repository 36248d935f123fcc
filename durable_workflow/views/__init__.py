"""JSON views the host project mounts (see ``durable_workflow.ops_urls``)."""
