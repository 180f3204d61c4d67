"""durably.postgres"""
