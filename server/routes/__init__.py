"""HTTP routes, one module per concern; ``server.main`` wires them."""
