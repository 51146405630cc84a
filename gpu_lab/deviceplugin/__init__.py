"""A fake NVIDIA device plugin over the real device-plugin API: its config, gRPC stubs and server.

The kubelet's side of that API (device manager, Registration server) is :mod:`gpu_lab.kubelet`.
"""
