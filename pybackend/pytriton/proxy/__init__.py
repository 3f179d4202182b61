"""``pytriton.proxy``: only the request type is public."""
