"""What is the whole plan, and what does each host get? ``assembly.cluster_plan`` (the one entry
point), the files each host receives (``files``), each host's slice of the plan (``host_plan``),
host settings every node gets (``system``) and how site.yml rolls changes out (``rollout``)."""
