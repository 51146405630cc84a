"""The kubelet side: what a node does with the pods the scheduler binds to it.

The device manager and pod admission (shared by the simulator and the local backend), the
device-plugin Registration server, and the local backend's node agent that plays the kubelet
of simulated nodes against a real API server.
"""
