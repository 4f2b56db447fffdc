"""The Kubernetes path (gpucluster_cluster.scheduler: kubernetes): Kueue, KubeRay, GPU and Network Operator objects."""
