"""The HTTP master: sessions, planning and steps over a cluster of tasks, served with FastAPI.

``main.create_app(settings)`` builds the app; ``python -m services.master`` serves it.
"""
