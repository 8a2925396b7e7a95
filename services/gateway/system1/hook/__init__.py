"""Model routing: yes/no features of a prompt, and the rule that turns them into a tier."""
