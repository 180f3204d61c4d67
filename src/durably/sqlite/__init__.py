"""durably.sqlite"""
