"""Recurrent networks: GNMT (Wu et al. 2016), LSTM encoder/decoder with attention, data parallel."""
