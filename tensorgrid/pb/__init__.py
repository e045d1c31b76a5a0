"""tensorgrid.pb"""
