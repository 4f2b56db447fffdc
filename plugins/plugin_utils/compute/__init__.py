"""How do the GPU nodes run? GPU power and rack budget, clock locks, cooling thresholds, DCGM
policy, node health check, NCCL settings and the training parallelism that fits the cluster."""
