"""The network: the only package that imports grpc. Servicers wrap the worker and master cores;
clients implement the cores' TaskClient and RemoteRecv interfaces."""
