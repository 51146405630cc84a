"""The DRA driver's side, as NVIDIA's DRA driver for GPUs plays it on a node: the ResourceSlices a
node publishes (``resourceslices``), what preparing a claim hands the container (``prepare``) and
the resource.k8s.io objects the driver and the backends create (``objects``). The sim's
allocator, the node agent and the local backend all read the same devices from here.
"""
