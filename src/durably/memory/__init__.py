"""durably.memory"""
