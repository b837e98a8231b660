"""broker/server"""
