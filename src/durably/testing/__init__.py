"""durably.testing"""
