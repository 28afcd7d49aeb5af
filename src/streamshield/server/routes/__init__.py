"""HTTP routers included by :func:`streamshield.server.app.create_app`."""
