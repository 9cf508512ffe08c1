-- AlterTable
ALTER TABLE "Review" ADD COLUMN     "nextReminderAt" TIMESTAMP(3),
ADD COLUMN     "remindersSent" INTEGER NOT NULL DEFAULT 0;

-- CreateTable
CREATE TABLE "AuditRecord" (
    "id" UUID NOT NULL,
    "executionId" UUID NOT NULL,
    "kind" TEXT NOT NULL,
    "taskKey" TEXT,
    "round" INTEGER,
    "actor" TEXT,
    "decision" TEXT,
    "feedback" TEXT,
    "outputHash" TEXT,
    "msToDecision" INTEGER,
    "resumeStatus" TEXT,
    "resumeMessage" TEXT,
    "detail" JSONB,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "AuditRecord_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "AuditRecord_executionId_createdAt_idx" ON "AuditRecord"("executionId", "createdAt");

-- CreateIndex
CREATE INDEX "Review_state_nextReminderAt_idx" ON "Review"("state", "nextReminderAt");

