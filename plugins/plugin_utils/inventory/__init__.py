"""What does the site have, and is it valid? Reading the inventory (``site``), its checks and
PlanError (``errors``), the GPU catalog (``catalog``), the tier profiles (``tiers``), and Ansible's
containers as plain data (``plain``)."""
