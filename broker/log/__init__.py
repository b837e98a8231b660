"""broker/log"""
