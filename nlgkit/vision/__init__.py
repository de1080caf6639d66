"""Images and image encoders for captioning (and, later, multimodal translation)."""
