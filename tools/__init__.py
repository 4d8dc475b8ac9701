"""Scripts that maintain the course (see README.md here); not part of the installed package."""
