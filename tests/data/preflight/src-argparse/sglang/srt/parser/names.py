NSA_CHOICES = ["flashmla_kv", "fa3"]
