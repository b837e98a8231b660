"""broker/cluster"""
