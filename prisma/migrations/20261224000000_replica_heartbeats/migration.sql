-- CreateTable
CREATE TABLE "Replica" (
    "id" TEXT NOT NULL,
    "startedAt" TIMESTAMP(3) NOT NULL,
    "heartbeatAt" TIMESTAMP(3) NOT NULL,
    "stoppedAt" TIMESTAMP(3),

    CONSTRAINT "Replica_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "Replica_heartbeatAt_idx" ON "Replica"("heartbeatAt");

