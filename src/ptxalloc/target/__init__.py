"""The target model: SM profiles, the register-unit model of the register file, budgets and
occupancy."""
