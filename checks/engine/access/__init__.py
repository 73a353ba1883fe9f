"""Every load and store a kernel makes (in Triton's interpreter): the patches that see them (`patches`), the
recorder that tallies them (`recorder`) by region (`regions`), the log the grading process writes (`log`),
reading it (`queries`), and the memory-traffic report beside the answer key's (`traffic`)."""
