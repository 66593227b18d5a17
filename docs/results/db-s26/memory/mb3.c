#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(){ size_t L=262144; int N=4000; char*src=malloc(L); memset(src,7,L);
 void**k=malloc(N*8); double t=now();
 for(int i=0;i<N;i++){char*p=mmap(0,L,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0); for(size_t o=0;o<L;o+=4096)((volatile char*)p)[o]=0; k[i]=p;}
 printf("touch prefault: %.1f us\n",(now()-t)/N*1e6);
 t=now(); for(int i=0;i<N;i++) memcpy(k[i],src,L); printf("copy into prefaulted: %.1f us\n",(now()-t)/N*1e6);
 void**k2=malloc(N*8); t=now();
 for(int i=0;i<N;i++){char*p=mmap(0,L,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0); if(madvise(p,L,MADV_POPULATE_WRITE)) {perror("madvise");return 1;} k2[i]=p;}
 printf("madvise populate: %.1f us\n",(now()-t)/N*1e6);
 t=now(); for(int i=0;i<N;i++) memcpy(k2[i],src,L); printf("copy into populated: %.1f us\n",(now()-t)/N*1e6);
 return 0;}
