"""Dynamic Resource Allocation in the simulator: kube-scheduler v1.37's DRA model.

``objects`` reads and validates the resource.k8s.io/v1 kinds as the API server does,
``cel``/``celparse`` compile and run device selectors, ``pools`` and ``counters`` give the
allocator its view of a node's ResourceSlices, ``allocator`` is the structured allocator
(the "incubating" variant kube-scheduler picks with v1.37's default feature gates),
``state`` keeps the cluster's DRA objects and plays the resourceclaim controller, and
``slices`` publishes a DRA NodePool's GPUs as NVIDIA's driver does. The scheduler plugin
is ``gpu_lab.sim.plugins.dynamicresources``.
"""
