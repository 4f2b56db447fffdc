"""Where does data live? Storage sizing and local RAID, NFS exports and mounts, Lustre targets,
layouts, client tunables and LNet."""
