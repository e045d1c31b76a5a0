"""A worker task's process: the WorkerService (gRPC) over a WorkerCore.

``main.serve`` runs it; ``python -m services.worker`` is its command line.
"""
