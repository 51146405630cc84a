"""NodeResourcesFit and NodeResourcesBalancedAllocation (framework/plugins/noderesources)."""
