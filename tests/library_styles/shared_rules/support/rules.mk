all:
	nvcc -O3 $(SOURCES) -I$(SUPPORT) -o $(PROGRAM)

clean:
	rm -f $(PROGRAM)
