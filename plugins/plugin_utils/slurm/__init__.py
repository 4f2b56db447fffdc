"""How does Slurm see the cluster, and how are compute nodes restarted without killing jobs?
slurm.conf's nodes and partitions (``slurm``), drained rolling restarts (``rolling``)."""
