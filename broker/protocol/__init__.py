"""broker/protocol"""
