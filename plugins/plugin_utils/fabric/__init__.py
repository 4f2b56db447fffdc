"""How are hosts connected? Expected cabling and Slurm topology (``cabling``), the per-host
InfiniBand/RoCE settings (``fabric_host``), and the simulated lab
fabric (``ibsim``)."""
