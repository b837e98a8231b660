"""broker/groups"""
