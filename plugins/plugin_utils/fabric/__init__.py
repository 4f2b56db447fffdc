"""How are hosts connected? The fabric's design (``cabling``, ``sizing``), its cables generated where they
are read (``links``), Slurm's topology (``topology``), the per-host
InfiniBand/RoCE settings (``fabric_host``), and the simulated lab
fabric (``ibsim``)."""
