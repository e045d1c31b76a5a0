"""A parameter-server task's process: the same WorkerService as a worker (variables live in the
task's resources and are shared by name by every graph registered on it). It reuses
``services.worker``; checkpoint RPCs are added in a later issue."""
