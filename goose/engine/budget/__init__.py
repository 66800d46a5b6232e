"""budget=auto: the verification cost curve t(n), the hardware floor, and the policy that cuts a
tree to the prefix maximising expected tokens per second."""
