"""The processes of a tensorgrid cluster: thin shells over the core.

``services.master`` is the HTTP master (FastAPI); ``services.worker`` and ``services.ps`` serve one
task's WorkerService over gRPC. Each decodes requests, calls the core and encodes the answers.
"""
