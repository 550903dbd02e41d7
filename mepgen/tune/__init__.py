"""`mepgen tune`: the whole path, from one run of the application to a faster, checked application."""
