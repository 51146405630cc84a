"""The kubelet's device-plugin side: devices per resource and who holds them."""
