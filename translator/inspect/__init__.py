"""Looking at a run or a model: training curves (`translator plot`), a description
(`translator info`) and cross-attention heatmaps (`translator attention`)."""
