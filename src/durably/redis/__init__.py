"""durably.redis"""
