"""hermes-trainer"""
