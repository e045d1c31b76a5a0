"""tensorgrid.client"""
